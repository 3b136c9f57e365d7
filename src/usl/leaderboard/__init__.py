"""Leaderboards: scoring jobs, win rates, confidence intervals, ratings and rank correlation.

The data's path through this package::

    service.LeaderboardService.rank(spec)
      answers.Answers        the benchmark in memory (answers, lengths, content fingerprints)
      jobs.score             judge every (model, baseline) pair in both orders -> S (models x queries)
      judgments.JudgmentCache  every verdict in SQLite, so reruns and resumed jobs judge only what is new
      stats                  win rates, bootstrap CIs, CI-aware ranks, Kendall/Spearman
      ratings                Bradley-Terry ratings;  length_control: AlpacaEval-LC style win rates
      contradictions         warnings for criteria that pull against each other
      reference              published leaderboards (AlpacaEval) to correlate with
"""
