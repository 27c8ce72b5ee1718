"""Problem, hardware profiles, Plan, counts and the shared row schema: the bottom layer."""
