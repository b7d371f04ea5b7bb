# A PoT answer as a model would write it: reads table.csv, prints the final line.
# Try it: tqaforge sandbox run data/programs/count_wins.py --table data/tables/wtq_football_league_table.csv
import pandas as pd

df = pd.read_csv("table.csv")
print(f"Final Answer: {len(df)}")
