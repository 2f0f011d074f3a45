"""Building a DialBGM-style benchmark in four stages, each reproducible from a seed."""
