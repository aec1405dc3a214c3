"""HTTP routes on the app: tasks, dashboard figures, events, health and metrics, session, callbacks."""
