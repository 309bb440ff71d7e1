"""Team scope on a Chroma server: `address.py` (where the server is: the variables, else `<store>/team.json`),
`client.py` (the owner's connection, records, circuit breaker and outbox, held by the engine), `ops.py` (the
operations: promotion, team hits for recall and for the checks on write, deprecation, recent notes, status) and
`server.py` (`mnemo team serve`: a Chroma server behind an authenticating nginx). One room on one floor."""
