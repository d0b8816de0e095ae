// TestOrigin and friends
