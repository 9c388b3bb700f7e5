"""The special token ids, the one place they are defined.

The model pads with PAD_ID and masks it out; the SentencePiece vocabulary
is trained with these ids (`data.tokenizer`); decoding starts from BOS_ID
and stops at EOS_ID; the CTranslate2 export names them in its vocabulary.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
