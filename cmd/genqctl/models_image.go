package main

import "errors"

// writeTinyImage is implemented by the image backend work (issue 4). It
// returns the path it wrote.
func writeTinyImage(dir string, seed int64) (string, error) {
	return "", errors.New("tiny image models: not built yet")
}
