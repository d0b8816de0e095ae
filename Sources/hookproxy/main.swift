print("hookproxy")
