"""The public datasets ``ranker convert`` turns into ranking lists, one module per dataset."""
