"""The API's types, declared once on the ground floor: the records a call takes and gives
(records.py) and each method's result (results.py). `mnemo.api` re-exports them with the `Service`
protocol; the core may return them."""
