"""Fleet scale: many arms' bags → catalogue, paired datasets, gap trends and GapONet training on Ray."""
