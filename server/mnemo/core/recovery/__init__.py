"""Recovery: rolling backups (backup.py), repair of a damaged store (repair.py) and the checks of
`mnemo doctor` inside the owner (doctor.py). The SQL of salvage stays in store/."""
