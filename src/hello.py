print("hello from src")
