"""What to claim: the planner's entries and cursors, whose turn an occurrence is first, and
the handlers by job name. It reads schedules and answers what the database said; it never
talks to the database itself (the claim loop in `run` does)."""
