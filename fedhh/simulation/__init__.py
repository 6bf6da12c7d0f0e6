"""The exact population simulator: whole discoveries over a dataset in one process."""
