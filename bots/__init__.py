"""Scripted participants (oTree-bot style) that drive the real survey.

Personas (``bots.personas``) decide what to answer; drivers (``bots.drive``)
carry those answers to the server, in-process, over HTTP or through the
services. The bots import ``surveys``; ``surveys`` never imports the bots.
"""
