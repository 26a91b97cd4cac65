#define F "@SECRET@"
#line 1 F
