"""Quire's worker: claims tasks, runs them through executors, keeps leases, sweeps and reconciles."""
