"""Speech: faster-whisper checkpoints converted for mlx-audio and transcription; Kokoro's int8
ONNX converted for mlx-audio and speech synthesis.

- :mod:`ctranslate2` reads a CTranslate2 ``model.bin`` (the format faster-whisper ships);
- :mod:`whisper_convert` turns one into an mlx-audio Whisper folder;
- :mod:`models` finds (converting on first use) the folder a model reference means;
- :mod:`decode` turns audio files or bytes into 16 kHz mono samples (miniaudio, else PyAV);
- :mod:`live` cuts audio that is still arriving into windows at quiet points (``pcm_stream``
  turns raw PCM or WAV bytes, in pieces of any size, into samples);
- :mod:`transcribe` loads a folder with mlx-audio and yields segments as they are decoded;
- :mod:`formats` writes segments as text, SRT, WebVTT or JSON;
- :mod:`kokoro_convert` reads Kokoro's int8 ONNX export into an mlx-audio Kokoro folder;
- :mod:`phonemes` turns text into Kokoro phonemes with espeak-ng, sentence by sentence;
- :mod:`speak` synthesises speech and writes WAV or PCM as each sentence is ready;
- :mod:`encode` turns those samples into mp3, Ogg Opus, AAC or FLAC, chunk by chunk (PyAV).

Nothing here imports MLX, mlx-audio or transformers at module level.
"""
