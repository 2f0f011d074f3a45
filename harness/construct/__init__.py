"""Building a DialBGM-style benchmark in four stages, each reproducible from a seed.

1. `stage1`: keep the MusicCaps clips that can serve as background music under talk.
2. `stage2`: read DailyDialog, keep dialogues within turn/word bounds, caption them.
3. `stage3`: pick four candidate clips per dialogue by caption similarity ("1+3" rule) and
   write the dataset folder (docs/formats.md), without rankings yet.
4. `stage4`: turn per-annotator rankings into the consensus ranking (Borda count) and keep
   the items the annotators agreed on (Kendall's W).
"""
