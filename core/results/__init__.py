"""What a run produced, and readings of results: the record, how a fit ended, spread,
agreement, reach, the headline, the story's steps and Compare's like-with-like groups."""
