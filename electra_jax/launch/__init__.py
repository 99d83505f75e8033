"""The Python side of launch/: what the launch scripts generate (a GKE JobSet)."""
