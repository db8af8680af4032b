"""Fuzzing of every input the agent parses (Hypothesis): nothing but the component's own error escapes,
the last good value stays in force, and the error is counted and logged once per change."""
