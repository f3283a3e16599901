"""The parts of bench_team (a vault shared by a team in PostgreSQL), one concern per module."""
