"""The server's settings (the request limits are every door's, ``usl.leaderboard.limits.LIMITS``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from usl.server.hosts import Access
from usl.server.limits import ConnectionLimits


@dataclass(frozen=True)
class ServerConfig:
    benchmark: str = field(default="alpaca_eval", metadata={"help": "Benchmark shown by default."})
    judges: tuple[str, ...] = field(default=("default",),
                                    metadata={"help": "Judges a request may name; the first is the default. "
                                                      "Others are refused: a judge spec can name a model path."})
    reference: str = field(default="crm",
                           metadata={"help": "Judge that refines a board on request (GET /api/leaderboard/refine): "
                                             "the slow reference CRM; '' turns refinement off."})
    refine_queries: int = field(default=1, metadata={"help": "Queries the reference judges between two "
                                                             "refined boards sent to the page."})
    refine_workers: int = field(default=1, metadata={"help": "Refinement steps that may run at once; more "
                                                             "streams take turns a step at a time (the "
                                                             "reference CRM already uses every core)."})
    refine_streams_per_client: int = field(default=2, metadata={"help": "Refinement streams one client may "
                                                                        "hold open (more: 429)."})
    refine_streams: int = field(default=8, metadata={"help": "Refinement streams open at once in all (more: 503)."})
    workers: int = field(default=2, metadata={"help": "Threads that rank leaderboards."})
    max_waiting: int = field(default=4, metadata={"help": "Boards that may wait for a worker, all clients "
                                                          "together; more are answered 503 with Retry-After."})
    max_waiting_per_client: int = field(default=3, metadata={"help": "Boards one client may have waiting."})
    max_new_readings: int = field(default=64, metadata={"help": "Pairs a board may have the quality reader read "
                                                                "(about a second of CPU each); a board needing "
                                                                "more (a new baseline: thousands) is refused "
                                                                "with the command that reads them."})
    votes_per_minute: int = field(default=100, metadata={"help": "Votes one client may store a minute "
                                                                 "(POST /api/check/votes; more: 429)."})
    cache_size: int = field(default=64, metadata={"help": "Finished leaderboards kept in memory."})
    connection: ConnectionLimits = field(default_factory=ConnectionLimits,
                                         metadata={"help": "Body, header, read-time and shutdown limits."})
    access: Access = field(default_factory=Access,
                           metadata={"help": "Hosts, origins and the token that may use the server."})
    warm: bool = field(default=True, metadata={"help": "Rank the default leaderboard at start-up."})
    progress_interval_s: float = field(default=0.1, metadata={"help": "How often progress is checked."})
    heartbeat_s: float = field(default=1.0, metadata={"help": "Progress is sent at least this often, "
                                                              "so a silent judge does not look stuck."})

    def __post_init__(self):
        if not self.judges:
            raise ValueError("ServerConfig.judges must name at least one judge")
        if min(self.refine_queries, self.refine_workers, self.refine_streams_per_client, self.refine_streams,
               self.max_waiting, self.max_waiting_per_client, self.votes_per_minute) < 1:
            raise ValueError("ServerConfig's refine_*, max_waiting* and votes_per_minute settings must be at least 1")
