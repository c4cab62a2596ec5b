"""One module per chain stage, named after it (snake_case of the stage name)."""
