"""What xAI's two voice WebSockets share (``xai_tts``, ``xai_stt``): their parameters
in the URL's query, their audio encodings, their flat ``error`` message, and the
unified stream each turn of theirs is (:mod:`.turn`)."""
