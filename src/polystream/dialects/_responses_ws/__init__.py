"""The Responses API over a WebSocket: the session (lanes, steering, the wrapped
``error``), shared by the families that speak it (``openai_responses_ws``,
``xai_responses_ws``); each reply is decoded by the shared Responses code
(:mod:`polystream.dialects._responses`) bound to the provider's quirks.
"""
