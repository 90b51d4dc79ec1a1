"""A plugin package as a third party would write it; autorl's tests install it."""
