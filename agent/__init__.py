"""The MultiQ agent: one per member cluster; admits, runs and reports the work placed on it."""
