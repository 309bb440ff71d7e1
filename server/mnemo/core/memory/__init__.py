"""Operations on memories: the write path (write.py, with neighbours.py), recall (recall.py, with
filters.py), get/promote/deprecate/forget/list (manage.py), edits and undo (history.py) and the
memories anchored to a file (anchored_to_file.py)."""
