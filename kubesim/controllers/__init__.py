"""In-process controllers of a simulated cluster: jobs, scheduler, garbage collection, nodes."""
