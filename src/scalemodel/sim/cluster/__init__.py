"""GPU cluster scheduler simulator: jobs, cluster, placement, policies and the event loop."""
