"""The NiceGUI pages: upload, dashboard, task detail, sign-in."""
