"""The kubesim API server: storage, watch, routing, patch, selectors, tables and discovery."""
