"""usl: a user-centric subjective leaderboard for LLMs, judged by customizable reward models."""

__version__ = "0.1.0"
