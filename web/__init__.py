"""The pieces every page and API shares: security headers, the inline stylesheet,
outage and error pages, sliding sessions and the researcher sign-in."""
