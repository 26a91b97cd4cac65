# 1 "@SECRET@"
