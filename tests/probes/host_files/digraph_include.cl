%:include "@SECRET@"
