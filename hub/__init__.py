"""The MultiQ hub: global queues, fleet quota, placement, the store and the agent sessions."""
