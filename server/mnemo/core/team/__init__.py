"""Team scope on a Chroma server. `settings.py`: where the server is (floor 0); `client.py`: the owner's
connection, records, circuit breaker and outbox (a resource, held by the engine); `ops.py`: the operations
(promotion, team hits for recall and for the checks on write, deprecation, recent notes, status)."""
