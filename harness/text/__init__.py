"""Text rules at the bottom of the harness: how numbers are written and how text is escaped for
each medium. Nothing here imports the rest of the harness, so every layer may use it."""
