"""The anomaly engine: six pure rules, suppression with resolution, delivery."""
