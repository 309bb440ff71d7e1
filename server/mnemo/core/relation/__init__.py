"""How a new note relates to a near one (compare.py) and the words that decision reads (words.py)."""
