"""Deployment targets, one module each, side by side: `saved_model` (TF Serving)
and `ctranslate2` (the TensorFlow-free C++ engine, an optional extra), with
`ctranslate2_translator` to translate with the latter; `settings` holds what
they share, and `loading` opens any model folder for translation.

Nothing here is imported by `import keras_transformer`, so the optional
ctranslate2 package is only ever loaded by the CTranslate2 modules.
"""
