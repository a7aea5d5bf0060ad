"""From evidence to a verdict and fixes; applying fixes with rollback."""
