"""Safety checks on text that enters or leaves the store: screening (screen.py: invisible Unicode,
prompt injection, the secrets policy) and the secret detectors (secrets.py)."""
