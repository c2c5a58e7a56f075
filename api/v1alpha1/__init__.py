"""multiq.dev/v1alpha1: every MultiQ kind. Import kinds from here or from their modules."""
