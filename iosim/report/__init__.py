"""The HTML report: its rows (data), figures and page (plotly; no CLI code)."""
