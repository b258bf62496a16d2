"""The Realtime API's vocabulary (OpenAI's, spoken by xAI too): the session, its
responses as unified streams, its commands, audio formats, usage and finish reasons.

The families that speak it (``openai_realtime``, ``xai_realtime``) bind
:class:`~polystream.dialects._realtime_api.session.RealtimeAPISession` in their
``binding.py`` with their name, descriptor and differences.
"""
