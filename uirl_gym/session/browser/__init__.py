"""Chromium over the DevTools protocol: launch (``cdp``, ``chromium``), the tabs
(``tabs``), input (``input``, with ``keys``' US layout), frames and screenshots
(``capture``), and the browser session a session server drives (``session``)."""
