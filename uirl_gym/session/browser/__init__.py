"""Chromium over the DevTools protocol: launch (``cdp``, ``chromium``), key tables
(``keys``), and the browser session a session server drives (``session``)."""
